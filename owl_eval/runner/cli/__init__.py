"""The command lines: ``owl-eval`` (``main``) and ``owl-eval-evaluate`` (``evaluate``) through one entry
(``entry``: flags and repeated arguments checked (``flags``, ``overrides``), the help page (``help``), every error one
``error:`` line (``console``)), and the end-of-run summary (``summary``). May import every other runner sub-package."""
