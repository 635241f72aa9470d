"""The central-DP and DP-QQ family: private thresholds and their public plans."""
