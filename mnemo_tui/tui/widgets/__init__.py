"""Provides the TUI's widgets: the feed, the scope list, the activity panel, the detail pane and notices."""
