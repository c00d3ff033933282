"""Ground floor: the settings object, the one error type, the registries of local models and encoders, and what the
CPU computes natively.

Everything else imports from here; nothing here imports another Tandem package.
"""
