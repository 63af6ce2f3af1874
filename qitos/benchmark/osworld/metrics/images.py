"""Image metrics with Pillow only (no numpy/scikit-image): pixel equality, a small SSIM, and the GIMP task
checks (brightness, contrast, saturation, mirror, background, positions, sizes).

SSIM here is computed on greyscale copies scaled to at most 160 px per side, with 7x7 windows and the usual
constants (K1=0.01, K2=0.03); "structurally similar" means SSIM >= 0.9. That is close to, not identical with,
scikit-image's value; the threshold leaves room for the difference.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._util import as_list, score

SSIM_THRESHOLD = 0.9
_SSIM_SIDE = 160
_WINDOW = 7


def _image(source: Any) -> Any:
    """Open a path or bytes as a fully loaded PIL image; None when missing or unreadable."""
    from PIL import Image, UnidentifiedImageError

    if source is None:
        return None
    try:
        if isinstance(source, (bytes, bytearray)):
            data = bytes(source)
        elif Path(source).is_file():
            data = Path(source).read_bytes()  # from memory, so multi-frame images hold no open file
        else:
            return None
        img = Image.open(io.BytesIO(data))
        img.load()
        return img
    except (UnidentifiedImageError, OSError):
        return None


def _pixels(img: Any) -> list[Any]:
    """Pixel values in row order (Pillow 11+ renamed getdata to get_flattened_data)."""
    getter = getattr(img, "get_flattened_data", None) or img.getdata
    return list(getter())


def _frames(img: Any) -> list[Any]:
    frames = []
    for index in range(getattr(img, "n_frames", 1)):
        img.seek(index)
        frames.append(img.convert("RGBA"))
    return frames


def same_pixels(a: Any, b: Any) -> bool:
    """True iff two images (paths or bytes) have the same size and identical RGBA pixels in every frame."""
    from PIL import ImageChops

    x, y = _image(a), _image(b)
    if x is None or y is None or x.size != y.size:
        return False
    fx, fy = _frames(x), _frames(y)
    # getextrema, not getbbox: getbbox on RGBA looks at the alpha band only.
    return len(fx) == len(fy) and all(
        all(high == 0 for _, high in ImageChops.difference(p, q).getextrema()) for p, q in zip(fx, fy)
    )


def compare_images(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both images are pixel-identical (all frames for animated GIFs); encodings may differ."""
    return score(same_pixels(result, expected))


def compare_image_list(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the lists line up and each result image is pixel-identical to its gold image."""
    got, want = as_list(result), as_list(expected)
    return score(bool(got) and len(got) == len(want) and all(same_pixels(a, b) for a, b in zip(got, want)))


def ssim(a: Any, b: Any) -> float:
    """Mean SSIM of two PIL images of equal size (greyscale, downscaled)."""
    from PIL import Image

    x, y = a.convert("L"), b.convert("L")
    factor = max(1.0, max(x.size) / _SSIM_SIDE)
    size = (max(_WINDOW, round(x.size[0] / factor)), max(_WINDOW, round(x.size[1] / factor)))
    x, y = x.resize(size, Image.Resampling.BOX), y.resize(size, Image.Resampling.BOX)
    w, h = size
    px, py = _pixels(x), _pixels(y)
    tables = [_integral([f(p, q) for p, q in zip(px, py)], w, h) for f in (
        lambda p, q: p, lambda p, q: q, lambda p, q: p * p, lambda p, q: q * q, lambda p, q: p * q)]
    c1, c2, n = (0.01 * 255) ** 2, (0.03 * 255) ** 2, _WINDOW * _WINDOW
    total, count = 0.0, 0
    for top in range(h - _WINDOW + 1):
        for left in range(w - _WINDOW + 1):
            sx, sy, sxx, syy, sxy = (_box(t, w, left, top) for t in tables)
            mx, my = sx / n, sy / n
            vx, vy, cov = sxx / n - mx * mx, syy / n - my * my, sxy / n - mx * my
            total += ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
            count += 1
    return total / count


def _integral(values: list[float], w: int, h: int) -> list[float]:
    table = [0.0] * ((w + 1) * (h + 1))
    for row in range(h):
        running = 0.0
        for col in range(w):
            running += values[row * w + col]
            table[(row + 1) * (w + 1) + col + 1] = table[row * (w + 1) + col + 1] + running
    return table


def _box(table: list[float], w: int, left: int, top: int) -> float:
    stride = w + 1
    right, bottom = left + _WINDOW, top + _WINDOW
    return table[bottom * stride + right] - table[top * stride + right] - table[bottom * stride + left] + table[top * stride + left]


def _similar(result: Any, expected: Any, resize: bool = False) -> bool:
    a, b = _image(result), _image(expected)
    if a is None or b is None:
        return False
    if a.size != b.size:
        if not resize:
            return False
        a = a.resize(b.size)
    return ssim(a, b) >= SSIM_THRESHOLD


def check_structure_sim(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both images have the same size and SSIM >= 0.9."""
    return score(_similar(result, expected))


def check_structure_sim_resized(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the result, resized to the gold image's size, has SSIM >= 0.9 with it."""
    return score(_similar(result, expected, resize=True))


def check_file_exists_and_structure_sim(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the exported file exists and is structurally similar to the original."""
    return check_structure_sim(result, expected)


def _stat(img: Any, mode: str, band: int = 0) -> tuple[float, float]:
    from PIL import ImageStat

    stat = ImageStat.Stat(img.convert(mode))
    return stat.mean[band], stat.stddev[band]


def _changed_and_similar(result: Any, expected: Any, mode: str, band: int, use_std: bool, increase: bool) -> float:
    a, b = _image(result), _image(expected)
    if a is None or b is None or a.size != b.size:
        return 0.0
    got, want = _stat(a, mode, band)[use_std], _stat(b, mode, band)[use_std]
    changed = got > want if increase else got < want
    return score(changed and ssim(a, b) >= SSIM_THRESHOLD)


def check_brightness_decrease_and_structure_sim(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the result is darker (mean luminance) than the original and structurally similar."""
    return _changed_and_similar(result, expected, "L", 0, False, increase=False)


def check_contrast_increase_and_structure_sim(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the result has a higher luminance standard deviation than the original and is similar."""
    return _changed_and_similar(result, expected, "L", 0, True, increase=True)


def check_saturation_increase_and_structure_sim(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the result's mean HSV saturation is higher than the original's and it is similar."""
    return _changed_and_similar(result, expected, "HSV", 1, False, increase=True)


def check_palette_and_structure_sim(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the result is an indexed-colour (palette) image structurally similar to the original."""
    a = _image(result)
    return score(a is not None and a.mode == "P" and _similar(result, expected))


def check_image_size(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the image's width/height equal the `width`/`height` given in the rules."""
    img = _image(result)
    if img is None or not isinstance(expected, Mapping):
        return 0.0
    width, height = img.size
    return score(expected.get("width", width) == width and expected.get("height", height) == height)


def check_image_file_size(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the file exists and is at most `rules.max_size` bytes."""
    if result is None or not Path(result).is_file() or not isinstance(expected, Mapping):
        return 0.0
    return score(Path(result).stat().st_size <= int(expected.get("max_size", 0)))


def _mean_abs_diff(a: Any, b: Any) -> float:
    from PIL import ImageChops, ImageStat

    diff = ImageChops.difference(a.convert("RGB"), b.convert("RGB"))
    return sum(ImageStat.Stat(diff).mean) / 3


def check_image_mirror(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the result is the original flipped left-right (mean channel difference <= 2/255)."""
    from PIL import ImageOps

    a, b = _image(result), _image(expected)
    if a is None or b is None or a.size != b.size:
        return 0.0
    return score(_mean_abs_diff(a, ImageOps.mirror(b.convert("RGB"))) <= 2.0)


def check_green_background(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff at least 90% of the original's near-white (background) pixels are green in the result
    (green exceeds red and blue by 64+), the result having the original's size."""
    a, b = _image(result), _image(expected)
    if a is None or b is None or a.size != b.size:
        return 0.0
    background = [i for i, (r, g, bl) in enumerate(_pixels(b.convert("RGB"))) if min(r, g, bl) >= 240]
    if not background:
        return 0.0
    pixels = _pixels(a.convert("RGB"))
    green = sum(1 for i in background if pixels[i][1] - max(pixels[i][0], pixels[i][2]) >= 64)
    return score(green >= 0.9 * len(background))


def _foreground(img: Any) -> tuple[list[tuple[int, int]], int]:
    """Pixels that differ from the most common colour (taken as background), and the image width."""
    rgb = img.convert("RGB")
    counts = rgb.getcolors(maxcolors=rgb.size[0] * rgb.size[1]) or []
    background = max(counts)[1] if counts else (255, 255, 255)
    w = rgb.size[0]
    return [(i % w, i // w) for i, p in enumerate(_pixels(rgb)) if sum(abs(x - y) for x, y in zip(p, background)) > 60], w


def check_triangle_position(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the shape's centroid (non-background pixels) is within 5% of the image centre on both axes."""
    img = _image(result)
    if img is None:
        return 0.0
    points, _ = _foreground(img)
    if not points:
        return 0.0
    cx = sum(p[0] for p in points) / len(points)
    cy = sum(p[1] for p in points) / len(points)
    w, h = img.size
    return score(abs(cx - w / 2) <= 0.05 * w and abs(cy - h / 2) <= 0.05 * h)


def check_textbox_on_leftside(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff all dark (text) pixels, every channel < 40, lie in the left half of the image."""
    img = _image(result)
    if img is None:
        return 0.0
    w = img.size[0]
    xs = [i % w for i, p in enumerate(_pixels(img.convert("RGB"))) if max(p) < 40]
    return score(bool(xs) and max(xs) < w / 2)


METRICS = {
    "compare_images": compare_images,
    "compare_image_list": compare_image_list,
    "check_structure_sim": check_structure_sim,
    "check_structure_sim_resized": check_structure_sim_resized,
    "check_file_exists_and_structure_sim": check_file_exists_and_structure_sim,
    "check_brightness_decrease_and_structure_sim": check_brightness_decrease_and_structure_sim,
    "check_contrast_increase_and_structure_sim": check_contrast_increase_and_structure_sim,
    "check_saturation_increase_and_structure_sim": check_saturation_increase_and_structure_sim,
    "check_palette_and_structure_sim": check_palette_and_structure_sim,
    "check_image_size": check_image_size,
    "check_image_file_size": check_image_file_size,
    "check_image_mirror": check_image_mirror,
    "check_green_background": check_green_background,
    "check_triangle_position": check_triangle_position,
    "check_textbox_on_leftside": check_textbox_on_leftside,
}
