import json,sys
rows=json.load(open(sys.argv[1]))
rows = rows['rows'] if isinstance(rows,dict) else rows
for r in rows:
    print(r['model'], r['strategy'], r.get('micro_batches'), r.get('status')[:10], 'mean',round(r.get('step_ms') or 0,1), 'best',round(r.get('step_ms_best') or 0,1), 'pred',round(r.get('predicted_step_ms') or 0,1), 'cuts', r.get('cuts'))
    tl=r.get('timeline'); pt=r.get('predicted_timeline')
    if tl:
        for a,b in zip(sorted(tl,key=lambda o:(o['start_ms'])), sorted(pt,key=lambda o:o['start_ms'])):
            print('  ', a['kind'],a.get('stage'),a.get('micro'), round(a['start_ms'],1), round(a['end_ms']-a['start_ms'],2), '|', b['kind'],b.get('stage'), round(b['start_ms'],1), round(b['end_ms']-b['start_ms'],2))
        print('   measured end', round(max(o['end_ms'] for o in tl),1), 'pred end', round(max(o['end_ms'] for o in pt),1))
