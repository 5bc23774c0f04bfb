"""`python -m probectl` runs the command line."""
from .cli import main

main()
