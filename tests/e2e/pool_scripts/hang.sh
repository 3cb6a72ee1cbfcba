#!/bin/sh
# Test provisioner that never returns (a cloud API that hangs); its timeout must kill it.
echo "waiting for the cloud API..."
exec sleep 600
