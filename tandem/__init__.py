"""Top floor: the `tandem` command line and the launchers that start and stop processes (demo, cluster,
llm-server, console), plus `tandem doctor`. Everything below is a library; this package is where it is put to work."""
