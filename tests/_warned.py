"""A model that MuJoCo warns about while loading it, shared by several test modules."""

from __future__ import annotations

import mujoco

# loads, but MuJoCo 4 warns while compiling it: settotalmass is deprecated
WARNED_XML = """
<mujoco>
  <compiler settotalmass="2"/>
  <worldbody><body><freejoint/><geom type="box" size=".1 .1 .1"/></body></worldbody>
</mujoco>
"""


def load_warnings() -> list[str]:
    """What MuJoCo warns while compiling WARNED_XML (nothing on versions that do not)."""
    heard: list[str] = []
    mujoco.set_mju_user_warning(heard.append)
    try:
        mujoco.MjModel.from_xml_string(WARNED_XML)
    finally:
        mujoco.set_mju_user_warning(None)
    return heard
