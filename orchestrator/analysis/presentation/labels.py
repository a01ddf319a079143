"""How numbers and names read, in the terminal and in reports, gathered for presentation:
numbers in human units (orchestrator/core/human.py, where the rules are), labels for runs
(`analysis/run_labels.py`) and short kernel names (`analysis/timeline/kernel_names.py`). Each
lives below the analysis, which uses them too; presentation reads them as `labels.X`.
"""

from __future__ import annotations

from orchestrator.analysis.run_labels import column_labels as column_labels
from orchestrator.analysis.run_labels import letters as letters
from orchestrator.analysis.run_labels import short_labels as short_labels
from orchestrator.analysis.timeline.kernel_names import TAG_WORDS as TAG_WORDS
from orchestrator.analysis.timeline.kernel_names import distinct_kernels as distinct_kernels
from orchestrator.analysis.timeline.kernel_names import short_kernel as short_kernel
from orchestrator.core.human import NEAR_ZERO as NEAR_ZERO
from orchestrator.core.human import NOT_MEASURED as NOT_MEASURED
from orchestrator.core.human import change_text as change_text
from orchestrator.core.human import convert as convert
from orchestrator.core.human import dur as dur
from orchestrator.core.human import elapsed as elapsed
from orchestrator.core.human import human as human
from orchestrator.core.human import in_unit as in_unit
from orchestrator.core.human import num as num
from orchestrator.core.human import row_unit as row_unit
from orchestrator.core.human import size as size
