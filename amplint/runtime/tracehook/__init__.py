"""Holds amplint trace's ``sitecustomize`` start-up hook (see sitecustomize.py)."""
