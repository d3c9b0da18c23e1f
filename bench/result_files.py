"""JSON and CSV result files, rewritten whole after every measured shape so a
run stopped by a watchdog still leaves every row it measured."""
import csv
import json
import os


def write_json(path, document):
    """Writes through a temporary file and a rename: a reader (or a kill)
    never sees half a file."""
    temporary = f"{path}.tmp"
    with open(temporary, "w") as out:
        json.dump(document, out, indent=1)
        out.write("\n")
    os.replace(temporary, path)


def add_output_arguments(parser):
    """The options every benchmark script shares: where results go, which
    commit they belong to, and the device."""
    parser.add_argument("--json", help="write the rows and the environment here")
    parser.add_argument("--csv", help="write the rows here")
    parser.add_argument("--commit", help="the commit measured (default: git rev-parse of this checkout)")
    parser.add_argument("--device", default="cuda",
                        help="cuda, or cpu for a smoke run of this script (its times mean nothing)")


def save(document, json_path, csv_path, fields):
    """Rewrites whichever result files were asked for with every row so far."""
    if json_path:
        write_json(json_path, document)
    if csv_path:
        write_csv(csv_path, document["rows"], fields)


def write_csv(path, rows, fields):
    """One line per row; the given fields first, then any other keys seen."""
    columns = list(fields) + sorted({key for row in rows for key in row} - set(fields))
    temporary = f"{path}.tmp"
    with open(temporary, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=columns, restval="")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: "" if value is None else value for key, value in row.items()})
    os.replace(temporary, path)
