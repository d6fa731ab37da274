from reclaimlab.cli import app

app(prog_name="reclaimlab")
