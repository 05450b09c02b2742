"""The api12_* cases (cases.py) as one list for m/apibatch.py: python apilist.py > /tmp/b12/api.json"""
import json, sys, os, shlex
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import driver; sys.modules["driver"] = driver
import cases
out = []
for c in driver.CASES:
    if c["name"].startswith("api12_") and not c["name"].startswith("api12_re12_g4"):
        code = shlex.split(c["cmd"])[-1]
        out.append([c["name"], code, c["expect"]])
json.dump(out, sys.stdout)
