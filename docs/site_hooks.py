"""mkdocs hooks for the course site: the home page is the README's introduction, the notebook table of the
registry of lessons (course_utils.lessons) with the README's notes on it, and the README's full-profile section;
the *Lecture map* page is rendered from docs/lecture_map.yml (course_utils.lecture_map), its links opening the
lessons' cells; a notebook page's table of contents is made from its rendered headings, inline code included; a
style sheet keeps the home table's file names whole; the notebooks' formulas are typeset by the copy of MathJax that
`make slides` vendors (build/slides/vendor/mathjax), published with the site so that it renders offline."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.structure.toc import get_toc

from course_utils import colab, lecture_map
from course_utils.lessons import site_table

README = Path(__file__).resolve().parent.parent / "README.md"
LECTURE_MAP_SOURCE, LECTURE_MAP_PAGE = "docs/lecture_map.yml", "lectures.md"  # the README links the source
MATHJAX = README.parent / "build" / "slides" / "vendor" / "mathjax"  # fetched by the Makefile (npm), as for the decks
MATHJAX_SITE_DIR = "assets/mathjax"
MATHJAX_URL_MARK = 'src="course-mathjax/'  # mkdocs.yml's custom_mathjax_url, made relative to each page below
MATHJAX_PARTS = ("MathJax.js", "config/TeX-AMS_CHTML-full.js", "extensions", "jax/input/TeX", "jax/output/CommonHTML",
                 "jax/element", "localization/en", "fonts/HTML-CSS/TeX/woff", "fonts/HTML-CSS/TeX/otf")


def _section(readme: str, title: str) -> str:
    """The text of the README's section ``## title``, up to the next section."""
    return readme.split(f"\n## {title}\n\n", 1)[1].split("\n## ", 1)[0]


def home_page(readme: str) -> str:
    """The README's title and introduction, the registry's notebook table (its site version) with the README's
    notes under it, and
    the README's section on the full profile. Links to notebooks (lessons and their published full-profile runs)
    point at their pages, which sit where the notebooks sit; other relative links point at the file on GitHub."""
    intro = readme.split("\n## ", 1)[0]
    notes = _section(readme, "Notebooks").split("\n\n", 1)[1]
    full = _section(readme, "The full profile")
    text = f"{intro}\n## Notebooks\n\n{site_table()}\n\n{notes}\n## The full profile\n\n{full}"
    text = re.sub(r"\]\(notebooks/((?:full/)?\d\d_\w+\.ipynb)\)", r"](\1)", text)
    text = text.replace(f"]({LECTURE_MAP_SOURCE})", f"]({LECTURE_MAP_PAGE})")
    pages = r"(?:full/)?\d\d_\w+\.ipynb\)|lectures\.md\)"  # the site's own pages
    return re.sub(rf"\]\((?!https?://|#|{pages})([^)]+)\)", rf"]({colab.blob_url()}\1)", text)


# The home table: the topics take the room they need to read as text, the times stay on their lines.
STYLE_SHEET = "assets/course.css"  # mkdocs.yml's extra_css
STYLE = """.course-lessons td:first-child { width: 2.5em; }
.course-lessons td:nth-child(3) { min-width: 16em; }
.course-lessons td:nth-child(4) { white-space: nowrap; }
"""


class _Headings(HTMLParser):
    """The headings of a rendered page that have an id: ``(level, id, inner HTML without the anchor link)``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.found: list[tuple[int, str, str]] = []
        self._open: tuple[int, str] | None = None
        self._html: list[str] = []
        self._in_anchor = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if re.fullmatch(r"h[1-6]", tag) and named.get("id"):
            self._open, self._html = (int(tag[1]), str(named["id"])), []
        elif self._open and tag == "a" and "anchor-link" in (named.get("class") or ""):
            self._in_anchor = True
        elif self._open and not self._in_anchor:
            self._html.append(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        if self._open and tag == f"h{self._open[0]}":
            self.found.append((*self._open, "".join(self._html).strip()))
            self._open = None
        elif self._in_anchor and tag == "a":
            self._in_anchor = False
        elif self._open and not self._in_anchor:
            self._html.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if self._open and not self._in_anchor:
            self._html.append(data)

    def handle_entityref(self, name: str) -> None:
        self.handle_data(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.handle_data(f"&#{name};")


def headings(html: str) -> list[tuple[int, str, str]]:
    """``(level, id, title as HTML)`` of every heading of ``html`` with an id, in order."""
    parser = _Headings()
    parser.feed(html)
    return parser.found


def toc_tokens(found: list[tuple[int, str, str]]) -> list[dict]:
    """Nest headings by level into the tokens that mkdocs makes a table of contents of."""
    root: list[dict] = []
    stack: list[dict] = []
    for level, anchor, title in found:
        token = {"level": level, "id": anchor, "name": title, "children": []}
        while stack and stack[-1]["level"] >= level:
            stack.pop()
        (stack[-1]["children"] if stack else root).append(token)
        stack.append(token)
    return root


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """The repository's links (header and each page's "edit" button) from course_utils.colab."""
    config.repo_url = colab.REPOSITORY_URL
    config.repo_name = "GitHub"
    config.edit_uri = f"blob/{colab.REF}/notebooks/"
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "index.md", content=home_page(README.read_text())))
    files.append(File.generated(config, LECTURE_MAP_PAGE, content=lecture_map.markdown(lecture_map.load())))
    files.append(File.generated(config, STYLE_SHEET, content=STYLE))
    if not (MATHJAX / "MathJax.js").is_file():
        raise PluginError(f"MathJax is not in {MATHJAX}: build the site with `make site`, which fetches it with npm.")
    for part in MATHJAX_PARTS:
        for path in [MATHJAX / part] if (MATHJAX / part).is_file() else sorted((MATHJAX / part).rglob("*")):
            if path.is_file():
                dest = f"{MATHJAX_SITE_DIR}/{path.relative_to(MATHJAX).as_posix()}"
                files.append(File.generated(config, dest, abs_src_path=str(path)))
    return files


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """A notebook's table of contents from its rendered headings (mkdocs-jupyter makes it from the Markdown,
    where it drops inline code from the titles and so links to anchors that the page does not have); the home
    table marked for the style sheet."""
    if page.file.src_uri.endswith(".ipynb"):
        page.toc = get_toc(toc_tokens(headings(html)))  # type: ignore[arg-type]
    if page.file.src_uri == "index.md":  # the notebook table, for the style sheet
        start, end = html.index("<table>"), html.index("</table>") + len("</table>")
        html = f'{html[:start]}<div class="course-lessons">{html[start:end]}</div>{html[end:]}'
    return html


def on_post_page(output: str, page: Page, config: MkDocsConfig) -> str:
    """A notebook page loads the site's MathJax by a path relative to the page, so that it works offline too."""
    up = "../" * page.url.count("/")
    return output.replace(MATHJAX_URL_MARK, f'src="{up}{MATHJAX_SITE_DIR}/')
