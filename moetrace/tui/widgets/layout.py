"""Timeline geometry shared by its mixins: the label gutter and the fixed rows above lanes."""

LABEL_WIDTH = 24  # cells of the lane-label gutter
FIXED_ROWS = 2  # overview + time ruler above the lanes
