"""Provides the values beyond the feed, each module imported only by the code that builds or reads its values."""
