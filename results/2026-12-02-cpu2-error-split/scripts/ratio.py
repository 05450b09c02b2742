import sys, pipebench
model = sys.argv[1]
ps = pipebench.profile(model, batch=8, device="cpu", devices=["cpu", "cpu"], flavour="tiny", micro_batches=1, link_gbps=1.0)
p = ps[0]
seg = sum(l.forward_ms + l.backward_ms for l in p.layers)
print(f"{model} segments {seg:.2f} whole {p.whole_step_ms:.2f} ratio {seg / p.whole_step_ms:.2f}")
