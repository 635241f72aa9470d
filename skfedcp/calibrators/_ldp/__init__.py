"""The local-DP family: randomized-response labels (LDP-L) and scores (LDP-S)."""
