"""Tests that need root and the live tracefs."""
