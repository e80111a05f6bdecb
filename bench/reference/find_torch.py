"""The PyTorch references run under a python3 that has PyTorch. On Debian 12 that is
/usr/bin/python3 with the package python3-torch (1.13); a python3 found first on PATH (a pyenv
shim, a virtual environment) often lacks it. require_torch() returns when `import torch`
works; else it runs the script again, same arguments, under /usr/bin/python3 (once); if that
cannot import torch either, it prints one line naming the package and exits 2.
"""
import importlib
import os
import sys

DEBIAN_PYTHON = "/usr/bin/python3"
_FIRST = "SHARDTRAIN_TORCH_TRIED"  # the interpreter tried first, set for the second run only


def require_torch():
    try:
        importlib.import_module("torch")
        return
    except ImportError as error:
        reason = str(error)
    first = os.environ.get(_FIRST)
    if (
        first is None
        and os.access(DEBIAN_PYTHON, os.X_OK)
        and os.path.realpath(sys.executable or "") != os.path.realpath(DEBIAN_PYTHON)
    ):
        os.environ[_FIRST] = sys.executable or "python3"
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, sys.argv[0], *sys.argv[1:]])
    tried = " and ".join(dict.fromkeys(p for p in (first, sys.executable) if p))
    sys.stderr.write(
        f"{os.path.basename(sys.argv[0])}: needs PyTorch: 'import torch' failed under {tried} "
        f"({reason}); on Debian 12: apt-get install -y python3-torch\n"
    )
    sys.exit(2)
