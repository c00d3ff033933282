"""The `tandem` sub-commands, one module per topic; each exposes `register(cli)`."""
