"""Ground floor: the settings object, the one error type, and the registries of local models and encoders.

Everything else imports from here; nothing here imports another Tandem package.
"""
