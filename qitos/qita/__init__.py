"""qita: the board to browse, replay, compare and export QitOS runs."""
