"""``python -m nnabla_jit.utils.inspection [--markdown] [--readme README.md]``: the table of
what exists for each op, or the README's supported-ops section rewritten from it."""
import argparse

from . import registry_table, update_readme

parser = argparse.ArgumentParser(description="Show what exists for each op.")
parser.add_argument("--readme", help="rewrite the supported-ops table of this README")
parser.add_argument("--markdown", action="store_true")
args = parser.parse_args()
if args.readme:
    print("updated" if update_readme(args.readme) else "up to date")
else:
    print(registry_table(markdown=args.markdown))
