"""mkdocs hooks: serve every result's artifacts (flame graphs, folded stacks, casts, logs)
at ``results/<host>/<path>`` in the built site, and fail the build on an invalid result.
"""

from __future__ import annotations

from mkdocs.structure.files import File

from labkit import results


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
