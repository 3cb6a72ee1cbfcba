"""tree(files): a temporary repository holding `files` ({relative path: text}) for the checkers' tests."""
import pathlib
import tempfile


def tree(files):
    root = pathlib.Path(tempfile.mkdtemp())
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
