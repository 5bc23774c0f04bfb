"""The fuzz pass and the defects it found."""
