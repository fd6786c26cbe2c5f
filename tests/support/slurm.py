"""SLURM without a cluster: what this repository's CI node reports, and stand-ins for its tools."""

# What this repository's CI node reports (sinfo -h -N -p debug -o '%N|%c|%m'; scontrol -o).
NODES = "vm|2|24105\n"
SCONTROL = ("PartitionName=debug AllowGroups=ALL Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED "
            "MinNodes=0 MaxCPUsPerNode=UNLIMITED Nodes=vm State=UP TotalCPUs=2 TotalNodes=1 "
            "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=cpu=2,mem=24105M,node=1\n")


def write_fake_slurm(bin_dir, calls):
    """sinfo/scontrol/sacct/squeue/sbatch stand-ins: a 2-CPU partition; sbatch records calls."""
    bin_dir.mkdir()
    scripts = {
        "sinfo": 'case "$*" in *"-N -p debug"*) echo "vm|2|24105";; *) echo "debug*";; esac',
        "scontrol": f'case "$*" in *partition*) echo "{SCONTROL.strip()}";; '
                    '*) echo "MinJobAge = 300 sec";; esac',
        "sacct": "exit 0",
        "squeue": "exit 0",
        "sbatch": f'echo "$*" >> {calls}; exit 1',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
