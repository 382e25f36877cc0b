import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while the CLI itself imports: no traceback, never 0
    print("interrupted", file=sys.stderr)
    sys.exit(130)

main()
