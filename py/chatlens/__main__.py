from .host.cli import main

raise SystemExit(main())
