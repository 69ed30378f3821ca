"""``python -m claudetrace`` runs the command line."""

from claudetrace.cli import main

if __name__ == "__main__":
    main()
