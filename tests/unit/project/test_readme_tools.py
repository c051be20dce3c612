"""README.md says what `make test` installs: every package the Makefile's tools and image-tools targets install
with apt-get is named in the README's sentence about it."""

from __future__ import annotations

import re

from tests.support.paths import ROOT

# How the README names each Debian package the Makefile installs.
NAMED = {"graphviz": "Graphviz", "openssh-server": "OpenSSH's client and server",
         "openssh-client": "OpenSSH's client and server", "chromium": "Chromium", "gpg": "gpg",
         "buildah": "buildah", "mmdebstrap": "mmdebstrap"}


def test_the_readme_names_every_package_make_test_installs():
    makefile = (ROOT / "Makefile").read_text()
    tools = makefile.split("TOOL_PACKAGES :=", 1)[1].split("\ntools:", 1)[0]
    packages = set(re.findall(r",,([a-z0-9-]+)\)", tools))
    image = makefile.split("\nimage-tools:", 1)[1].split("\nimage:", 1)[0]
    packages |= set(re.search(r"install -y -qq ([a-z0-9 -]+?) >", image).group(1).split())
    assert packages >= {"graphviz", "gpg", "chromium", "buildah"}, packages
    readme = " ".join((ROOT / "README.md").read_text().split())
    sentence = readme.split("run as root on Debian, installs ", 1)[1].split(" with apt-get", 1)[0]
    missing = sorted(p for p in packages if NAMED[p] not in sentence)
    assert not missing, f"README.md does not say `make test` installs {missing}: {sentence!r}"
