"""PDF, image and archive metrics on files generated in the test (hand-written PDFs, Pillow images)."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest
from osworld_testfiles import write_pdf

Image = pytest.importorskip("PIL.Image")
from PIL import ImageDraw, ImageEnhance, ImageOps  # noqa: E402

from qitos.benchmark.osworld.metrics import METRICS  # noqa: E402
from qitos.benchmark.osworld.metrics.images import ssim  # noqa: E402


def test_compare_pdfs_and_pages(tmp_path: Path) -> None:
    a = str(write_pdf(tmp_path / "a.pdf", ["Constitution of the club", "Article one"]))
    b = str(write_pdf(tmp_path / "b.pdf", ["Constitution of the club", "Article one"]))
    c = str(write_pdf(tmp_path / "c.pdf", ["Something else entirely"]))
    assert METRICS["compare_pdfs"](a, b) == 1.0
    assert METRICS["compare_pdfs"](a, c) < 0.5
    assert METRICS["compare_pdfs"]([a, c], [b, c]) == 1.0
    assert METRICS["check_pdf_pages"](c, {"relation": "eq", "ref_value": 1}) == 1.0
    assert METRICS["check_pdf_pages"](a, {"relation": "eq", "ref_value": 1}) == 0.0
    not_pdf = tmp_path / "x.pdf"
    not_pdf.write_text("hello")
    assert METRICS["compare_pdfs"](str(not_pdf), b) == 0.0


def test_compare_pdf_images(tmp_path: Path) -> None:
    def pdf(name: str, colour: tuple[int, int, int]) -> str:
        path = tmp_path / name
        Image.new("RGB", (20, 20), colour).save(path, "PDF")
        return str(path)

    red, red2, blue = pdf("r.pdf", (255, 0, 0)), pdf("r2.pdf", (255, 0, 0)), pdf("b.pdf", (0, 0, 255))
    assert METRICS["compare_pdf_images"](red, red2) == 1.0
    assert METRICS["compare_pdf_images"](red, blue) == 0.0


def scene(size: tuple[int, int] = (96, 64), background=(255, 255, 255), shift: int = 0):
    img = Image.new("RGB", size, background)
    draw = ImageDraw.Draw(img)
    draw.rectangle((10 + shift, 10, 40 + shift, 50), fill=(200, 60, 40))
    draw.ellipse((50, 8, 90, 40), fill=(30, 90, 200))
    draw.line((0, 60, 95, 20), fill=(0, 0, 0), width=3)
    return img


def save(img, path: Path) -> str:
    img.save(path)
    return str(path)


def test_pixel_equality(tmp_path: Path) -> None:
    a = save(scene(), tmp_path / "a.png")
    assert METRICS["compare_images"](a, save(scene(), tmp_path / "a.bmp")) == 1.0
    assert METRICS["compare_images"](a, save(scene(shift=3), tmp_path / "b.png")) == 0.0
    assert METRICS["compare_image_list"]([a, a], [a, a]) == 1.0
    assert METRICS["compare_image_list"]([a], [a, a]) == 0.0


def test_animated_gif_frames_are_compared(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (10, 10), c) for c in ((255, 0, 0), (0, 0, 255), (0, 255, 0))]
    a, b = tmp_path / "a.gif", tmp_path / "b.gif"
    frames[0].save(a, save_all=True, append_images=[frames[1]])
    frames[0].save(b, save_all=True, append_images=[frames[2]])
    assert METRICS["compare_images"](str(a), str(a)) == 1.0
    assert METRICS["compare_images"](str(a), str(b)) == 0.0


def test_ssim_behaves() -> None:
    base = scene()
    assert ssim(base, base) == pytest.approx(1.0)
    noise = Image.effect_noise((96, 64), 80).convert("RGB")
    assert ssim(base, noise) < 0.5


def test_structure_similarity_family(tmp_path: Path) -> None:
    original = scene()
    o = save(original, tmp_path / "o.png")
    assert METRICS["check_structure_sim"](save(original, tmp_path / "same.png"), o) == 1.0
    assert METRICS["check_structure_sim"](save(Image.effect_noise((96, 64), 80).convert("RGB"), tmp_path / "n.png"), o) == 0.0
    assert METRICS["check_structure_sim"](save(original.resize((48, 32)), tmp_path / "small.png"), o) == 0.0
    assert METRICS["check_structure_sim_resized"](save(original.resize((192, 128)), tmp_path / "big.png"), o) == 1.0
    assert METRICS["check_structure_sim_resized"](save(ImageOps.flip(original), tmp_path / "flip.png"), o) == 0.0
    assert METRICS["check_file_exists_and_structure_sim"](o, o) == 1.0
    assert METRICS["check_file_exists_and_structure_sim"](str(tmp_path / "none.jpg"), o) == 0.0


def test_brightness_contrast_saturation(tmp_path: Path) -> None:
    original = scene(background=(180, 170, 160))
    o = save(original, tmp_path / "o.png")
    darker = save(ImageEnhance.Brightness(original).enhance(0.85), tmp_path / "d.png")
    brighter = save(ImageEnhance.Brightness(original).enhance(1.1), tmp_path / "b.png")
    assert METRICS["check_brightness_decrease_and_structure_sim"](darker, o) == 1.0
    assert METRICS["check_brightness_decrease_and_structure_sim"](brighter, o) == 0.0
    contrast = save(ImageEnhance.Contrast(original).enhance(1.3), tmp_path / "c.png")
    assert METRICS["check_contrast_increase_and_structure_sim"](contrast, o) == 1.0
    assert METRICS["check_contrast_increase_and_structure_sim"](o, o) == 0.0
    colourful = save(ImageEnhance.Color(original).enhance(1.5), tmp_path / "s.png")
    assert METRICS["check_saturation_increase_and_structure_sim"](colourful, o) == 1.0
    assert METRICS["check_saturation_increase_and_structure_sim"](save(ImageOps.grayscale(original).convert("RGB"), tmp_path / "g.png"), o) == 0.0


def test_palette_size_file_size_mirror(tmp_path: Path) -> None:
    original = scene()
    o = save(original, tmp_path / "o.png")
    assert METRICS["check_palette_and_structure_sim"](save(original.convert("P", palette=Image.Palette.ADAPTIVE), tmp_path / "p.png"), o) == 1.0
    assert METRICS["check_palette_and_structure_sim"](o, o) == 0.0
    assert METRICS["check_image_size"](o, {"height": 64}) == 1.0
    assert METRICS["check_image_size"](o, {"height": 128, "width": 96}) == 0.0
    assert METRICS["check_image_file_size"](o, {"max_size": 600000}) == 1.0
    assert METRICS["check_image_file_size"](o, {"max_size": 10}) == 0.0
    assert METRICS["check_image_mirror"](save(ImageOps.mirror(original), tmp_path / "m.png"), o) == 1.0
    assert METRICS["check_image_mirror"](o, o) == 0.0


def test_green_background_triangle_and_textbox(tmp_path: Path) -> None:
    white = Image.new("RGB", (40, 40), (255, 255, 255))
    ImageDraw.Draw(white).rectangle((10, 10, 20, 20), fill=(200, 0, 0))
    green = white.copy()
    for x in range(40):
        for y in range(40):
            if green.getpixel((x, y)) == (255, 255, 255):
                green.putpixel((x, y), (0, 200, 0))
    w = save(white, tmp_path / "w.png")
    assert METRICS["check_green_background"](save(green, tmp_path / "g.png"), w) == 1.0
    assert METRICS["check_green_background"](w, w) == 0.0

    def triangle(offset: int) -> str:
        img = Image.new("RGB", (100, 100), (255, 255, 255))
        ImageDraw.Draw(img).polygon([(40 + offset, 60), (60 + offset, 60), (50 + offset, 40)], fill=(255, 220, 0))
        return save(img, tmp_path / f"t{offset}.png")

    assert METRICS["check_triangle_position"](triangle(0)) == 1.0
    assert METRICS["check_triangle_position"](triangle(30)) == 0.0

    def text_at(x: int) -> str:
        img = Image.new("RGB", (100, 40), (230, 230, 230))
        ImageDraw.Draw(img).rectangle((x, 10, x + 20, 20), fill=(0, 0, 0))
        return save(img, tmp_path / f"x{x}.png")

    assert METRICS["check_textbox_on_leftside"](text_at(5)) == 1.0
    assert METRICS["check_textbox_on_leftside"](text_at(60)) == 0.0


def _zip(path: Path, files: dict[str, bytes]) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return str(path)


def test_archives(tmp_path: Path) -> None:
    a = _zip(tmp_path / "a.zip", {"slides/one.txt": b"hello", "slides/two.txt": b"world"})
    b = _zip(tmp_path / "b.zip", {"slides/one.txt": b"hello", "slides/two.txt": b"world"})
    c = _zip(tmp_path / "c.zip", {"slides/one.txt": b"hello"})
    assert METRICS["compare_zip_files"](a, b) == 1.0
    assert METRICS["compare_zip_files"](a, c) == 0.0
    assert METRICS["compare_archive"](a, b, file_path="slides") == 1.0
    assert METRICS["compare_archive"](a, c) == 0.0
    pdf_dir = tmp_path / "pdfs"
    pdf_dir.mkdir()
    write_pdf(pdf_dir / "doc.pdf", ["Report"])
    tar_path = tmp_path / "pdf.tar.gz"
    with tarfile.open(tar_path, "w:gz") as archive:
        archive.add(pdf_dir / "doc.pdf", arcname="doc.pdf")
    gold = _zip(tmp_path / "gold.zip", {"doc.pdf": (pdf_dir / "doc.pdf").read_bytes()})
    assert METRICS["compare_archive"](str(tar_path), gold, file_type="pdf") == 1.0
    bad = _zip(tmp_path / "evil.zip", {"../escape.txt": b"x"})
    assert METRICS["compare_archive"](bad, bad) == 0.0


def test_epub_and_html(tmp_path: Path) -> None:
    page = "<html><head><style>p{}</style></head><body><p>Chapter 1</p><p>It  began.</p></body></html>"
    a = _zip(tmp_path / "a.epub", {"mimetype": b"application/epub+zip", "OEBPS/c1.xhtml": page.encode()})
    b = _zip(tmp_path / "b.epub", {"mimetype": b"application/epub+zip", "text/ch1.html": page.replace("  ", " ").encode()})
    c = _zip(tmp_path / "c.epub", {"OEBPS/c1.xhtml": b"<p>Other</p>"})
    assert METRICS["compare_epub"](a, b) == 1.0
    assert METRICS["compare_epub"](a, c) == 0.0
    h1, h2 = tmp_path / "a.html", tmp_path / "b.html"
    h1.write_text(page)
    h2.write_text("<div>Chapter 1 It began.</div>")
    assert METRICS["compare_htmls"](str(h1), str(h2)) == 1.0
    h2.write_text("<div>Chapter 2</div>")
    assert METRICS["compare_htmls"](str(h1), str(h2)) == 0.0
