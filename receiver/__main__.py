from receiver.cli.main import main

main()
