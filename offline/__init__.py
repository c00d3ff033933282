"""Offline work, apart from the serving path: public datasets, router training, encoder tuning, evaluation
(`make eval`), batch routing (`tandem route-batch`) and the README tables they write."""
