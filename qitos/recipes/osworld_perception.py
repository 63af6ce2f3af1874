"""Agent side: what upstream's PromptAgent makes of an OSWorld observation, as its code does it.

`linearize` is `linearize_accessibility_tree` (the kept nodes as a tab-separated table), `trim` is
`trim_accessibility_tree` (cut to a number of gpt-4 tokens with tiktoken's encoding, offline through
`qitos.models.tokenizer`), `tag_screenshot` is the set-of-marks drawing (`filter_nodes` +
`draw_bounding_boxes` of `accessibility_tree_wrap/heuristic_retrieve.py`), each with upstream's node filter
(`judge_node`). The texts in their output (table headers, the trimming mark) and the accessibility namespaces
come from upstream's files through the scoring side (`qitos.benchmark.osworld.prompt_texts`), in `texts`.

One deliberate difference: node coordinates are read with `ast.literal_eval` where upstream calls `eval` (the
same tuples; a tree cannot run code in the agent's process).
"""

from __future__ import annotations

import ast
import io
import xml.etree.ElementTree as ET
from typing import Any

# judge_node: the node kinds upstream keeps (by tag suffix, prefix, or exact tag)
KEPT_SUFFIXES = ("item", "button", "heading", "label", "scrollbar", "searchbox", "textbox", "link", "tabelement",
                 "textfield", "textarea", "menu")
KEPT_TAGS = frozenset({"alert", "canvas", "check-box", "combo-box", "entry", "icon", "image", "paragraph", "scroll-bar",
                       "section", "slider", "static", "table-cell", "terminal", "text", "netuiribbontab", "start",
                       "trayclockwclass", "traydummysearchcontrol", "uiimage", "uiproperty", "uiribboncommandbar"})
INTERACTIVE_STATES = ("enabled", "editable", "expandable", "checkable")


def _attr(node: ET.Element, namespace: str, name: str, default: Any = "") -> Any:
    return node.get(f"{{{namespace}}}{name}", default)


def judge_node(node: ET.Element, ns: dict[str, str], check_image: bool = False) -> bool:
    """Whether a node is kept (ubuntu): a kept kind, showing and visible, interactive, named or with text (or an
    image when `check_image`), and on screen with a positive size."""
    tag = node.tag
    keeps = tag.startswith("document") or tag.endswith(KEPT_SUFFIXES) or tag in KEPT_TAGS
    state = ns["state"]
    keeps = (keeps and _attr(node, state, "showing", "false") == "true" and _attr(node, state, "visible", "false") == "true"
             and any(_attr(node, state, s, "false") == "true" for s in INTERACTIVE_STATES)
             and (node.get("name", "") != "" or (node.text is not None and len(node.text) > 0)
                  or (check_image and node.get("image", "false") == "true")))
    coordinates = ast.literal_eval(_attr(node, ns["component"], "screencoord", "(-1, -1)"))
    sizes = ast.literal_eval(_attr(node, ns["component"], "size", "(-1, -1)"))
    return bool(keeps and coordinates[0] >= 0 and coordinates[1] >= 0 and sizes[0] > 0 and sizes[1] > 0)


def filter_nodes(root: ET.Element, ns: dict[str, str], check_image: bool = False) -> list[ET.Element]:
    return [node for node in root.iter() if judge_node(node, ns, check_image)]


def _quoted(text: str) -> str:
    return text if '"' not in text else '"{:}"'.format(text.replace('"', '""'))


def node_text(node: ET.Element, ns: dict[str, str]) -> str:
    """A node's text cell: its text, else an EditWrapper's value, else `""`; quoted CSV-style when it has `"`."""
    if node.text:
        return _quoted(node.text)
    if _attr(node, ns["class_windows"], "class").endswith("EditWrapper") and node.get(f"{{{ns['value']}}}value"):
        return _quoted(_attr(node, ns["value"], "value"))
    return '""'


def linearize(xml_text: str | None, texts: dict[str, Any]) -> str:
    """`linearize_accessibility_tree`: header, then tag, name, text, class, description, position, size per kept
    node. Like upstream, a missing tree is an error (upstream's `ET.fromstring(None)` fails the episode)."""
    if xml_text is None:
        raise ValueError("the observation has no accessibility tree (upstream's linearize_accessibility_tree "
                         "fails the episode here)")
    ns = texts["namespaces"]
    rows = [texts["a11y_header"]]
    for node in filter_nodes(ET.fromstring(xml_text), ns):
        rows.append("\t".join([
            str(node.tag), node.get("name", ""), node_text(node, ns), _attr(node, ns["attributes"], "class"),
            _attr(node, ns["attributes"], "description"), _attr(node, ns["component"], "screencoord"),
            _attr(node, ns["component"], "size")]))
    return "\n".join(rows)


def trim(text: str, max_tokens: int, mark: str) -> str:
    """`trim_accessibility_tree`: the first `max_tokens` gpt-4 tokens, then the mark, when the text is longer."""
    from qitos.models.tokenizer import gpt4_encoding

    encoding = gpt4_encoding()
    tokens = encoding.encode(text)
    if len(tokens) > max_tokens:
        return encoding.decode(tokens[:max_tokens]) + mark
    return text


def _font():
    from PIL import ImageFont

    try:
        return ImageFont.truetype("arial.ttf", 15)
    except OSError:  # as upstream: the default font where Arial is not installed
        return ImageFont.load_default()


def tag_screenshot(screenshot: bytes, xml_text: str | None, texts: dict[str, Any]) -> tuple[list[list[int]], bytes, str]:
    """The set-of-marks observation: (marks as [x, y, w, h], the tagged PNG, the index table), as upstream's
    `tag_screenshot` draws it: a red box and a white-on-black index per kept node (images included) whose
    box is not one flat colour."""
    from PIL import Image, ImageDraw

    if xml_text is None:
        raise ValueError("the observation has no accessibility tree (upstream's tag_screenshot fails the episode here)")
    ns = texts["namespaces"]
    nodes = filter_nodes(ET.fromstring(xml_text), ns, check_image=True)
    image = Image.open(io.BytesIO(screenshot))
    draw = ImageDraw.Draw(image)
    marks: list[list[int]] = []
    rows = [texts["som_header"]]
    font = _font()
    index = 1
    for node in nodes:
        coords_str, size_str = node.attrib.get(f"{{{ns['component']}}}screencoord"), node.attrib.get(f"{{{ns['component']}}}size")
        if not (coords_str and size_str):
            continue
        try:
            coords = tuple(map(int, coords_str.strip("()").split(", ")))
            size = tuple(map(int, size_str.strip("()").split(", ")))
            if size[0] <= 0 or size[1] <= 0:
                raise ValueError(f"Size must be positive, got: {size}")
            bottom_right = (coords[0] + size[0], coords[1] + size[1])
            if len(set(image.crop((*coords, *bottom_right)).getdata())) == 1:
                continue
            draw.rectangle([coords, bottom_right], outline="red", width=1)
            position = (coords[0], bottom_right[1])
            draw.rectangle(draw.textbbox(position, str(index), font=font, anchor="lb"), fill="black")
            draw.text(position, str(index), font=font, anchor="lb", fill="white")
            marks.append([coords[0], coords[1], size[0], size[1]])
            rows.append("{:d}\t{:}\t{:}\t{:}".format(index, node.tag, node.get("name", ""), node_text(node, ns)))
            index += 1
        except ValueError:  # a malformed coordinate or size: the node is skipped, as upstream skips it
            pass
    out = io.BytesIO()
    image.save(out, format="PNG")
    return marks, out.getvalue(), "\n".join(rows)
