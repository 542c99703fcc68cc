"""Every static-evaluation profile, by name: one published scorer each (AndroidLens: a paper's
rules, no code), with the repository, file and commit it follows and what it is known for."""

from __future__ import annotations

from . import agentcpm_gui, aitw, androidlens, gui_r1, guiodyssey, infigui_r1, os_atlas, ui_r1, uis1
from .common import Profile

_ALL = (
    Profile("aitw", aitw.match_aitw, aitw.SOURCE, aitw.KNOWN_FOR,
            reproduces="AITW-style tables (Android in the Wild; papers that score AndroidControl with AITW's matcher)"),
    Profile("androidcontrol", uis1.match_androidcontrol, uis1.SOURCE, uis1.KNOWN_FOR,
            reproduces="UI-S1's evaluate_android_control_action on the dataset's check_options (Qwen2.5-VL's rules)"),
    Profile("guiodyssey", guiodyssey.match_guiodyssey, guiodyssey.SOURCE, guiodyssey.KNOWN_FOR,
            reproduces="GUI-Odyssey's AMS and SR"),
    Profile("androidlens", androidlens.match_androidlens, androidlens.SOURCE, androidlens.KNOWN_FOR,
            reproduces="AndroidLens's static AMS (the paper's description; no code published)"),
    Profile("uis1-pipeline", uis1.match_uis1_pipeline, uis1.PIPELINE_SOURCE, uis1.PIPELINE_KNOWN_FOR,
            error_resets_progress=True,
            reproduces="UI-S1's AndroidControl SR and progress as its eval_qwenvl.py computes them"),
    Profile("infigui-r1", infigui_r1.match_infigui_r1, infigui_r1.SOURCE, infigui_r1.KNOWN_FOR,
            reproduces="InfiGUI-R1's AndroidControl step accuracy (type_match_acc, extact_match_acc)"),
    Profile("agentcpm-gui", agentcpm_gui.match_agentcpm_gui, agentcpm_gui.SOURCE, agentcpm_gui.KNOWN_FOR,
            skip=agentcpm_gui.skip, finish_step=True,
            reproduces="AgentCPM-GUI's AndroidControl type_acc, exact_acc, success_rate and goal_progress"),
    Profile("os-atlas", os_atlas.match_os_atlas, os_atlas.SOURCE, os_atlas.KNOWN_FOR,
            reproduces="OS-Atlas's AndroidControl step accuracy (Acc) and type_match acc"),
    Profile("ui-r1", ui_r1.match_ui_r1, ui_r1.SOURCE, ui_r1.KNOWN_FOR, skip=ui_r1.skip,
            reproduces="UI-R1's AndroidControl action-type and click accuracy"),
    Profile("gui-r1", gui_r1.match_gui_r1, gui_r1.SOURCE, gui_r1.KNOWN_FOR, skip=gui_r1.skip,  # type: ignore[arg-type]
            reads_unparsed=True, totals=gui_r1.totals,
            reproduces="GUI-R1's AndroidControl Step (eval_omni.py's grounding and text hits; gui_r1_step: its total)"),
)
PROFILE_MAP: dict[str, Profile] = {p.name: p for p in _ALL}
PROFILES: tuple[str, ...] = tuple(PROFILE_MAP)
