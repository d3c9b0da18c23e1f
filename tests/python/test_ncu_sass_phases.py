"""scripts/ncu_sass_phases.py on a fixture source-page CSV written here (CI).
The counts are synthetic, made up for the test: no results."""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ncu_sass_phases.py"

HEADER = '"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed"'


def fixture(path):
    rows = [
        ('0x10', "MOV R1, R2", 5, 1, 4),                         # prologue, once per warp
        ('0x20', "HGMMA.64x128x16.F32.BF16 R8, gdesc[UR4], RZ", 10, 5, 400),
        ('0x30', "WARPGROUP.DEPBAR.LE gsb0, 0x0", 30, 30, 400),
        ('0x40', "MUFU.EX2 R8, R8", 40, 20, 400),
        ('0x50', "@P0 BRA 0x20", 20, 10, 400),
    ]
    lines = ['"Kernel Name","kernel_under_test",', HEADER]
    lines += [f'"{a}","      {s}","{st}","{ni}","{n}"' for a, s, st, ni, n in rows]
    path.write_text("\n".join(lines) + "\n")


def test_steady_loop_opcodes_and_phase_cycles(tmp_path):
    csv = tmp_path / "sass.csv"
    fixture(csv)
    out = subprocess.run([sys.executable, str(SCRIPT), str(csv), "under_test", "1000"], capture_output=True,
                         text=True, check=True).stdout
    assert "steady loop: 4 instructions per warp per step (400 executions each)" in out
    assert "HGMMA 1" in out and "MUFU 1" in out and "MOV" not in out.split("by opcode:")[1].split("\n")[0]
    # 100 loop samples: the phase up to the wait holds 40 of them, the tail 60.
    assert "   400 cycles" in out
    assert "[tail]    2 instr     600 cycles" in out
