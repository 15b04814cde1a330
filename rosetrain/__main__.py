from rosetrain.cli import main

raise SystemExit(main())
