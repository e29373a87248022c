"""s25's pareto_table.py run over this directory's pareto-* runs (its code unchanged, only where it looks).
`python bench/results/2026-11-28-cpu-s27/pareto_table.py`"""
from pathlib import Path
here = Path(__file__).resolve().parent
src = here.parent / "2026-11-28-cpu-s25" / "pareto_table.py"
exec(compile(src.read_text(), str(here / "pareto_table.py"), "exec"), {"__file__": str(here / "pareto_table.py"),
                                                                        "__name__": "__main__"})
