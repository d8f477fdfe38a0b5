from evalkit.cli.main import main

main()
