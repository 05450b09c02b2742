import pipebench, tempfile
o = tempfile.mkdtemp(dir="/tmp/b5/work")
rows, c, j = pipebench.run(("mlp",), strategies=["single"], out=o, steps=1, warmup=0, rounds=1, note=None)
print("ROWS", len(rows), [r.status for r in rows])
