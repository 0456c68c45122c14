"""python3 main.py --config config/default.yaml [--port P] [--model M]: the server, through the openautoglm
package (installed, or from build/python after scripts/build.sh). Without a model in the configuration or
--model it serves scripts/serve.sh's default (scripts/default-model.sh of this repository) and says which."""
import os
import sys

try:
    import openautoglm  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "build", "python"))

from openautoglm.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]], repository=os.path.dirname(os.path.abspath(__file__))))
