"""python -m openautoglm serve --config config/default.yaml [--model M] [--host H] [--port P]"""
import argparse
import sys

from .service import AutoGLMService


def main(argv=None, repository=None):
    """`repository`: the Open-AutoGLM checkout whose default model is served when the configuration
    file (which is looked in first) names none (main.py passes its own folder)."""
    parser = argparse.ArgumentParser(prog="python -m openautoglm")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the OpenAI-compatible API")
    serve.add_argument("--config", help="YAML configuration file")
    serve.add_argument("-m", "--model", help="GGUF file or Hugging Face folder (overrides the config's)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    args = parser.parse_args(argv)
    try:
        AutoGLMService(model_path=args.model, config=args.config, repository=repository).run(host=args.host, port=args.port)
    except (ValueError, OSError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
