"""Rebuilds a gantry generator exported with `gantry models export --format pytorch`.

Plain PyTorch (1.13 or newer), no gantry import. The export is a dict written by LibTorch:
  format = "gantry-3dgan-generator", format_version = 1,
  description = JSON text of the layer list (EXPORT_FORMAT_PYTORCH in gantry/v1/catalog.proto),
  state_dict = {"dense.weight": ..., "stage0.conv.weight": ..., "stage0.bn.running_var": ...}.

    import torch, gantry_export
    model = gantry_export.load("model.pt")            # eval mode
    latent = torch.randn(4, model.noise_dim)
    energy = torch.tensor([[50.0], [100.0], [150.0], [200.0]])   # GeV
    showers = model(latent, energy)                   # [4, x, y, z] in GeV
    # variable-angle models (3dgan-51): model(latent, energy, theta) with theta [N, 1] in radians
"""
import json

import torch
from torch import nn
import torch.nn.functional as F

__all__ = ["Generator", "load"]

FORMAT = "gantry-3dgan-generator"


class _Stage(nn.Module):
    """[nearest upsample] -> zero pad -> Conv3d -> activation -> [BatchNorm3d, eval statistics]."""

    def __init__(self, spec):
        super().__init__()
        self.upsample = [int(f) for f in spec["upsample"]]
        pad = spec["pad"]  # [[x_before, x_after], [y_...], [z_...]]
        # F.pad lists the last axis first: z, y, x.
        self.pad = [pad[2][0], pad[2][1], pad[1][0], pad[1][1], pad[0][0], pad[0][1]]
        self.conv = nn.Conv3d(spec["in_channels"], spec["out_channels"], spec["kernel"],
                              bias=spec["bias"])
        self.relu = spec["activation"] == "relu"
        self.slope = spec["leaky_slope"]
        self.bn = nn.BatchNorm3d(spec["out_channels"], eps=spec["bn_eps"]) if spec["batch_norm"] else None

    def forward(self, x, add=None):
        if self.upsample != [1, 1, 1]:
            x = F.interpolate(x, scale_factor=tuple(float(f) for f in self.upsample), mode="nearest")
        if any(self.pad):
            x = F.pad(x, self.pad)
        x = self.conv(x)
        if add is not None:
            x = x + add
        x = F.relu(x) if self.relu else F.leaky_relu(x, self.slope)
        if self.bn is not None:
            x = self.bn(x)
        return x


class Generator(nn.Module):
    """The generator of one exported model: forward(latent, energy_gev[, theta_rad]) -> GeV showers."""

    def __init__(self, description):
        super().__init__()
        if description.get("format") != FORMAT or description.get("format_version") != 1:
            raise ValueError("not a gantry generator description (format %r, version %r)" %
                             (description.get("format"), description.get("format_version")))
        self.description = description
        self.variable_angle = description["architecture"] == "variable_angle_51"
        self.noise_dim = int(description["noise_dim"])
        self.grid = [int(g) for g in description["grid"]]
        self.dense_shape = [int(d) for d in description["dense_shape"]]
        self.energy_scale = float(description["energy_scale"])
        self.cell_scale = float(description["cell_scale"])
        self.cell_power = float(description["cell_power"])
        out = self.dense_shape[0] * self.dense_shape[1] * self.dense_shape[2] * self.dense_shape[3]
        self.dense = nn.Linear(int(description["latent"]), out)
        self.stage_count = len(description["stages"])
        for i, spec in enumerate(description["stages"]):
            setattr(self, "stage%d" % i, _Stage(spec))
        # [a, b, M_1 .. M_K]: the last stage adds e (a + b ln e + z_1 M_1 + ... + z_K M_K) before its
        # activation, e = energy / energy_scale, z_k the first K latent components.
        self.template_modes = int(description.get("template_modes", 0))
        self.shower_template = (nn.Parameter(torch.zeros(2 + self.template_modes, *self.grid))
                                if description.get("shower_template") else None)

    def forward(self, latent, energy, theta=None):
        """latent [N, noise_dim], energy [N, 1] GeV, theta [N, 1] rad (variable angle only)."""
        energy = energy.reshape(-1, 1) / self.energy_scale
        if self.variable_angle:
            if theta is None:
                raise ValueError("this model needs theta [N, 1] in radians")
            x = torch.cat([energy, theta.reshape(-1, 1), latent], dim=1)
        else:
            x = latent * energy
        x = self.dense(x).view(-1, *self.dense_shape)
        add = None
        if self.shower_template is not None:
            e = energy.reshape(-1, 1, 1, 1, 1)
            add = e * (self.shower_template[0] + torch.log(e) * self.shower_template[1])
            k = self.template_modes
            if k > 0:
                modes = self.shower_template[2:].reshape(k, -1)
                add = add + ((latent[:, :k] * energy) @ modes).view(-1, 1, *self.grid)
        for i in range(self.stage_count):
            last = i + 1 == self.stage_count
            x = getattr(self, "stage%d" % i)(x, add if last else None)
        x = x.squeeze(1)
        if self.cell_power != 1.0:
            x = torch.pow(x, 1.0 / self.cell_power)
        return x / self.cell_scale


def load(path, map_location="cpu"):
    """The Generator of an export file, its weights loaded, in eval mode."""
    try:
        blob = torch.load(path, map_location=map_location, weights_only=True)
    except TypeError:  # torch < 1.13 has no weights_only
        blob = torch.load(path, map_location=map_location)
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise ValueError("%s is not a gantry PyTorch export" % path)
    model = Generator(json.loads(blob["description"]))
    model.load_state_dict(blob["state_dict"], strict=True)
    model.eval()
    return model
