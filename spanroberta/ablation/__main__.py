"""`python -m spanroberta.ablation CONFIG --output_dir DIR`: the ablation from an installed package (command.py)."""

from .command import main

if __name__ == "__main__":
    main()
