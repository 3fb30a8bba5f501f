"""mkdocs hooks: serve every result's artifacts (flame graphs, folded stacks, casts, logs)
at ``results/<host>/<path>`` in the built site, and fail the build on an invalid result.
"""

from __future__ import annotations

import json
import re

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

from labkit import results

_PLAYER = re.compile(r"```asciinema-player\n(.*?)\n```", re.S)


def on_files(files, config):
    """Add each artifact file of each host to the site (``results/<label>/<artifact path>``).

    Raises:
        FileNotFoundError: a result names an artifact that is not on disk.
    """
    for host in results.load_hosts(results.ROOT):
        for result in host.results.values():
            for art in result["artifacts"]:
                src = host.dir / art["path"]
                if not src.is_file():
                    raise FileNotFoundError(f"{host.dir}/{result['lab']}.json names artifact {art['path']}, which is missing")
                files.append(File.generated(config, f"results/{host.label}/{art['path']}", abs_src_path=str(src)))
    return files


@event_priority(100)  # before mkdocs-asciinema-player, which drops a bad block silently
def on_page_markdown(markdown, page, config, files):
    """Fail the build on a hand-written asciinema-player block that is not valid JSON or
    whose ``file`` is missing (the player plugin would drop it from the page without an error)."""
    for block in _PLAYER.findall(markdown):
        try:
            conf = json.loads(block)
        except ValueError as exc:
            raise PluginError(f"{page.file.src_uri}: asciinema-player block is not JSON: {exc}") from None
        if "file" not in conf:
            raise PluginError(f"{page.file.src_uri}: asciinema-player block has no 'file'")
    return markdown
