"""Timeline geometry shared by the widget and its painter: the label gutter, the fixed rows
above the lanes, and the style of what is still pending (drawn before numpy is imported)."""

from rich.style import Style

LABEL_WIDTH = 24  # cells of the lane-label gutter when the labels are short
MAX_LABEL_WIDTH = 48  # never wider than this…
MAX_LABEL_SHARE = 0.3  # …nor than this share of the timeline (the rest is time)
FIXED_ROWS = 2  # overview + time ruler above the lanes


def label_width_for(content_width: int, needed: int) -> int:
    """Gutter cells for a timeline `content_width` cells wide whose labels need `needed`:
    24 (or 30% when that is less), growing with the labels up to 48 cells or 30%."""
    share = int(content_width * MAX_LABEL_SHARE)
    floor = max(min(LABEL_WIDTH, share), 8)
    return max(min(needed, MAX_LABEL_WIDTH, share), floor)


PENDING_STYLE = Style(color="#707070", italic=True)  # load progress, lanes still building
