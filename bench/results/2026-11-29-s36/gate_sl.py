import json,gzip,sys
for f in sys.argv[1:]:
    d=json.load(gzip.open(f)); ev=[e for e in d['traceEvents'] if e.get('ph')=='X']
    g=[e for e in ev if e['name'].startswith('gate')]
    t0=min(e['ts'] for e in ev)
    g.sort(key=lambda e:e['ts'])
    print(f, len(g))
    fin=[e for e in g if e['ts']-t0>5]
    jobs=[e for e in g if e['ts']-t0<=5]
    print(' jobs: start %.1f-%.1f end %.1f-%.1f'%(min(e['ts']-t0 for e in jobs),max(e['ts']-t0 for e in jobs),min(e['ts']+e['dur']-t0 for e in jobs),max(e['ts']+e['dur']-t0 for e in jobs)))
    for e in fin: print('  fin tid %s start %.1f dur %.1f end %.1f args %s'%(e['tid'],e['ts']-t0,e['dur'],e['ts']+e['dur']-t0,e.get('args')))
