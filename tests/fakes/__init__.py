"""Test doubles that no user needs: the stateful fake GitHub."""
