r"""What the chapters and the runner share: claims, the parameter rule, figure style and measurement
helpers. Imported by notebooks and by the runner, never by the science. The runner that executes the
chapters is not here: it is the book's tool, the top-level package ``nqfbook``, which takes the rule for
a chapter's parameters (:func:`parameter_type`) from here.
"""

from ._claims import ClaimError as ClaimError
from ._claims import Claims as Claims
from ._chapter import start_chapter as start_chapter
from ._glue import glue as glue
from ._chapter import by_fidelity as by_fidelity
from ._parameters import ParameterType as ParameterType
from ._parameters import parameter_type as parameter_type
from ._measure import intercept_fit as intercept_fit
from ._measure import step_deviation as step_deviation
from ._measure import crossing_time as crossing_time
from ._plots import structure_heatmap as structure_heatmap
from nqf._fit import loglog_slope as loglog_slope
from ._style import savefig as savefig
from ._style import PALETTE as PALETTE
from ._style import THEORY_KW as THEORY_KW
from ._style import MEASURED_KW as MEASURED_KW
from ._style import figsize as figsize
from ._layout import stacked as stacked
from ._layout import legend_below as legend_below
from ._powerlaw import PowerLawFit as PowerLawFit
from ._powerlaw import power_law_fit as power_law_fit
from ._powerlaw import switch_on_window as switch_on_window
from ._powerlaw import Sensitivity as Sensitivity
from ._powerlaw import window_sensitivity as window_sensitivity
from ._powerlaw import sharp_switch_tolerance as sharp_switch_tolerance
from ._criteria import mean_interval as mean_interval
from ._criteria import about_band as about_band
from ._tables import Table as Table
from ._tables import table as table
from ._verdicts import Rule as Rule
from ._verdicts import RuleChange as RuleChange
from ._verdicts import Verdict as Verdict
from ._verdicts import OptionVerdict as OptionVerdict
from ._verdicts import judge as judge
from ._verdicts import runs_needed as runs_needed
from ._verdicts import seed_mean_reading as seed_mean_reading
from ._verdicts import SeedMean as SeedMean
from ._claim import Claim as Claim
from ._claims_table import ClaimsSummary as ClaimsSummary
from ._claims_table import ClaimsTable as ClaimsTable

__all__ = [
    "about_band",
    "by_fidelity",
    "Claim",
    "ClaimError",
    "Claims",
    "ClaimsSummary",
    "ClaimsTable",
    "crossing_time",
    "figsize",
    "glue",
    "intercept_fit",
    "judge",
    "legend_below",
    "loglog_slope",
    "mean_interval",
    "MEASURED_KW",
    "OptionVerdict",
    "PALETTE",
    "parameter_type",
    "ParameterType",
    "power_law_fit",
    "PowerLawFit",
    "Rule",
    "RuleChange",
    "runs_needed",
    "savefig",
    "seed_mean_reading",
    "SeedMean",
    "Sensitivity",
    "sharp_switch_tolerance",
    "stacked",
    "start_chapter",
    "step_deviation",
    "structure_heatmap",
    "switch_on_window",
    "Table",
    "table",
    "THEORY_KW",
    "Verdict",
    "window_sensitivity",
]

# Importable as nqfbook.kit.X by the rooms above and by the tests, but not the documented surface
# (not in __all__): the rest of the room is private.
from ._claims import Claim as Claim
from ._style import use_style as use_style
from ._style import RC_PARAMS as RC_PARAMS
from ._style import COLUMN_WIDTH_IN as COLUMN_WIDTH_IN
from ._chapter import interactive_settings as interactive_settings
from ._chapter import unroll_threefry_on_cpu as unroll_threefry_on_cpu
from ._verdicts import verdict_contradictions as verdict_contradictions
