"""GAIA for QitOS: official scorer, local-copy loader, attachment readers, toolset, prompt, metrics.

Only the scorer and loader are imported eagerly; format libraries load on first use.
No GAIA content ships with QitOS: data comes from the user's own copy.
"""

from qitos.benchmark.gaia.dataset import GaiaDataError, GaiaQuestion, download_gaia, load_gaia
from qitos.benchmark.gaia.scorer import extract_final_answer, score_answer

__all__ = [
    "GaiaDataError",
    "GaiaQuestion",
    "download_gaia",
    "extract_final_answer",
    "load_gaia",
    "score_answer",
]
